"""Workers: an agent process (`agent.py` around the pure `agent_core.py`) and processor children
(`processor.py`) that run user functions, forked quickly from a pre-imported `zygote.py`."""
