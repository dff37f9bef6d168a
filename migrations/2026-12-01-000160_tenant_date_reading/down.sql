ALTER TABLE tenants
    DROP COLUMN date_order,
    DROP COLUMN date_languages;
