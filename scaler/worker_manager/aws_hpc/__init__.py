"""`scaler_worker_manager aws_hpc`: each task is an AWS Batch job; payloads and results travel inline or in S3."""
