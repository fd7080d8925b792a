"""`type = "kubernetes"`: each worker a pod, through the Kubernetes API (docs/guide/kubernetes.md)."""
