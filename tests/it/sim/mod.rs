//! Conformance tests of the simulated API server.
