"""The model and the math on its outputs: the network, decoding, the trace builder, projections."""
