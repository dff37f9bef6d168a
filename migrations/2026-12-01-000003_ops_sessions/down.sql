DROP TABLE ops_sessions;
