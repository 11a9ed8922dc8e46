"""The model families' names and labels: importable without torch (the app's home page shows them)."""
MODEL_NAMES = ("lstm", "dual-transformer", "minilm", "cross-encoder")  # the model_type of each family, in menu order
MODEL_LABELS = {"lstm": "Siamese LSTM", "dual-transformer": "Dual transformer encoder", "minilm": "MiniLM (fine-tune)",
                "cross-encoder": "MiniLM cross-encoder"}
CROSS_ENCODER = "cross-encoder"  # the family that scores pairs in one pass: it has no vectors to embed or search
ZERO_SHOT = "minilm"  # the load source that means the pretrained MiniLM, with no training
ZERO_SHOT_LABEL = "MiniLM zero-shot (pretrained, no training)"
TFIDF = "tfidf"  # the load source that means the TF-IDF cosine baseline: it scores pairs, it has no vectors
STACKED = "stacked"  # the model_type of a stacked scorer (calibrate --stacked): it scores pairs, it has no vectors
PAIR_SCORERS = (TFIDF, STACKED)  # the model types of saved folders that score pairs without vectors
