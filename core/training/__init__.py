"""Training a model: run specs and presets, the objectives over the losses, the trainer and its
pipeline (split, train, validate, save), the background job queue, distillation, mining and torchrun."""
