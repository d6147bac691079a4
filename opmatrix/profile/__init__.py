"""`opmatrix profile`: profile a real model step and rank its ops by what a custom kernel could win."""
