"""What runs on a cloud unit (an ECS task, an EC2 instance) before and around its workers: `boot` reads the
unit's manifest, installs what the manager ships, reports to the manager's bucket and runs the unit's program."""
