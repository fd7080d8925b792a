"""The reference's import path of its processor (`scaler.worker.agent.processor.processor`), kept for the libraries of
its family; this project's processors are `scaler.worker.processor`."""
