"""Filter and summarise application log lines."""
