"""A processor: the child process of a worker that runs user functions (`process.run_processor`). Its pure core,
`task_line.TaskLine`, decides which task computes and which thread runs it, under the processor protocol
(`scaler.protocol.processor_protocol`); `threads.TaskThreads` carries that out; `outlet` is its link to the
scheduler, where its tasks come and everything about them leaves; `channel` is its socket pair with its agent."""
