"""`scaler_worker_manager aws_raw_ecs`: workers in AWS ECS Fargate tasks (see `backend`)."""
