"""`opmatrix validate`: swap chosen kernels into a real model step, check its output and time it paired against the
unmodified model, and confirm (or not) the microbenchmark's verdict against the profile's Amdahl prediction."""
