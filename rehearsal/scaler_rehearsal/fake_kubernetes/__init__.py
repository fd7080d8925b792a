"""`scaler_fake_kubernetes`: a local Kubernetes API server and kubelet, for tests and users' rehearsals.

The API server speaks HTTPS with its own certificate authority and a bearer token (written into a kubeconfig), keeps
core v1 pods, secrets, configmaps, events, namespaces and nodes (and what the guide's manifests use) with the
semantics a client relies on; the kubelet runs each scheduled pod's container as a local process that has only what
its pod spec gives it. `scaler --docs kubernetes` ("Rehearse on a laptop") says what is faithful and what is not.
"""
