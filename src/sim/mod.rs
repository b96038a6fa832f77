//! The simulated Kubernetes API server used by tests, the demo and the benchmarks.
