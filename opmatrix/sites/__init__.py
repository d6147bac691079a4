"""The model sites: which places of a model's code each kernel group covers (`registry`) and the adapters that call
an opmatrix kernel in their place (`adapters`). `opmatrix profile` groups a step's time by these sites and
`opmatrix validate` swaps kernels into them, so both import them from here, below both."""
