"""`scaler_fake_cloud`: a local AWS endpoint (moto) that also runs what is launched on it, as local processes.

The cloud managers talk to it through plain boto3 (`AWS_ENDPOINT_URL`), so the code that runs here is the code
that runs in AWS; users rehearse a cloud configuration on a laptop before paying for it (docs/worker_managers.md,
7.1 "Rehearse on the fake cloud").
"""
