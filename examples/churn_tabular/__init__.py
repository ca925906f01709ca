"""A tabular churn classifier: named numeric fields in, a churn probability out."""
