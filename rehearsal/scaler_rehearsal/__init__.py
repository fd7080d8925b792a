"""What the two rehearsals share, the fake cloud (`scaler.fake_cloud`) and the fake Kubernetes
(`scaler.fake_kubernetes`): how an image reference is read (`images`), the mirror of the machine's ordinary commands
that a unit's PATH holds (`images`), and a unit's process group (`process_groups`)."""
