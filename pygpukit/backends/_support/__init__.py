"""Host-side plumbing both GPU backend homes share (plain Python, no Triton, no extension):

- ``output``: where a kernel writes (``out`` when the kernel can write it, else a fresh array)
  and the delivery of that result into ``out``;
- ``dtypes``: the dtype a result is computed in, and float results of integer inputs;
- ``rows``: arrays read as rows of their last dim (norms, softmax, rope, activations);
- ``collapse``: operands of an N-d map collapsed jointly over their dims, and the split along
  the leading dim when too many dims remain;
- ``scratch``: per-(device, stream) workspaces (cuBLASLt's, split-key decode attention's), with
  a CUDA graph being captured getting its own.

A backend module imports from here or from its own home, never from pygpukit.ops.
"""
