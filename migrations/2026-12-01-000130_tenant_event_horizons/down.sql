DROP TABLE tenant_event_horizons;
