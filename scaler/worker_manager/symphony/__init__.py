"""`scaler_worker_manager symphony`: each task is a task of an IBM Symphony (SOAM) service session."""
