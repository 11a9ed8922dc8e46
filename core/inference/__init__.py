"""Using a trained model: encoding corpora, evaluation and metrics, scoring files, FAISS search,
deduplication, error analysis, baselines, 2-D projection and batch inspection. Never trains."""
