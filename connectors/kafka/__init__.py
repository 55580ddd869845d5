"""Apache Kafka as the production log: the log, settings, topics, and the transactional scheduler."""
