pub mod crd;
