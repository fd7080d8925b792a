"""`scaler_worker_manager orb_aws_ec2`: workers on AWS EC2 instances (see `backend`)."""
