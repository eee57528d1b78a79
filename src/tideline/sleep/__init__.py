"""Sleep: trace dynamics, learned associations, the script layer and the report."""
