"""Alert delivery: sender plugins (webhook, email) and the service that delivers pending alert rows."""
