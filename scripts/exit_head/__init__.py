"""The EESD exit-head trainer's parts (scripts/train_exit_head.py): safetensors I/O, the training
data, the exit layer, the self-distillation loss and the learning curve (evaluations, the best
one, early stopping); and, for --predictor, the Cali-TS calibration data (cali_data) and
acceptance predictor (cali_predictor)."""
