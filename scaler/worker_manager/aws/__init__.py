"""What the AWS backends share: boto3 clients called off the event loop, AWS errors told apart by what the user
must do about them, and the command a cloud unit runs to become a pool of workers."""
