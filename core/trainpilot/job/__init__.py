"""What trains: the model (the zoo, or the user's own), the data, and the workload profile the
agent plans from (parameters, layers, FLOPs counted on a real forward and backward pass).

Importing this package loads nothing heavy: `model_names` stays importable without torch, so
pickers and `--help` can list the zoo.
"""
