"""The draft-head trainers' parts (scripts/train_exit_head.py, scripts/train_feature_head.py):
safetensors I/O, the training data, the exit layer, the self-distillation loss, the learning
curve (evaluations, the best one, early stopping) and the epoch loop both trainers run
(training_loop); the feature-level head (feature_head); and, for --predictor, the Cali-TS
calibration data (cali_data) and acceptance predictor (cali_predictor)."""
