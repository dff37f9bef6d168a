DROP TABLE tenant_events;
