"""A processor: the child process of a worker that runs user functions (`process.run_processor`). Its pure core,
`task_line.TaskLine`, decides which task computes and which thread runs it, under the processor protocol
(`scaler.protocol.processor_protocol`); `threads.TaskThreads` carries that out; `channel` is its link to the agent."""
