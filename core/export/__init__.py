"""Taking a model elsewhere: a sentence-transformers folder, an ONNX graph (float32 or int8), the
model card that goes with them, and the ONNX runtime backend that serves such a graph."""
