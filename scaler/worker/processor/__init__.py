"""A processor: the child process of a worker that runs user functions (`process.run_processor`), its channel to
the agent (`channel`), and the threads that run its tasks (`threads`)."""
