DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
