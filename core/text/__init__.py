"""Text as token ids: the word vocabulary and BERT WordPiece tokenizers, tokenised pair tables, and
length-sorted encoding batches. Knows files only through ``core.saving``; nothing of models or training."""
