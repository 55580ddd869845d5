"""The Kubernetes connector: CRDs and manifests, list+watch into observed events, Workload status writes, and
the batch/v1 Job integration. It translates between the cluster and the log; every decision is the scheduler's.
"""
