DROP INDEX tenants_processing_paused;
DROP TABLE tenant_enqueue_budgets;
ALTER TABLE tenants
    DROP COLUMN enqueue_burst,
    DROP COLUMN enqueue_rate_per_second;
