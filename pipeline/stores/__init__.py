"""DynamoDB-backed stores: the tracking table (job runs) and the concurrency semaphore."""
