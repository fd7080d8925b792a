"""The reference's import paths of settings (`scaler.config.section.scheduler.PolicyConfig`, ...)."""
