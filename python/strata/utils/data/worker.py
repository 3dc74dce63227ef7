"""Worker processes of a DataLoader (num_workers > 0), as PyTorch's: each reads and collates whole batches of a
map-style dataset in a process of its own, forked by default (the thread pools are fork-safe: Note [Thread pools after
fork] in strata/runtime/parallel.cpp), and the loader hands the batches out in the sampler's order."""
import itertools
import multiprocessing
import queue
import random
import traceback

import strata

_worker_info = None


class WorkerInfo:
    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


def get_worker_info():
    """In a DataLoader's worker process, its WorkerInfo (id, num_workers, seed, dataset); elsewhere None."""
    return _worker_info


class _Failure:
    """An exception raised in a worker, carried to the loader with its traceback."""

    def __init__(self, where):
        self.message = f"Caught {where}.\nOriginal {traceback.format_exc()}"


def _loop(dataset, collate_fn, worker_init_fn, worker_id, num_workers, seed, index_queue, result_queue):
    global _worker_info
    # Leaving with batches still queued must not wait for the loader to read them (it is stopping us).
    result_queue.cancel_join_thread()
    try:
        strata.manual_seed(seed)
        random.seed(seed)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception:
        result_queue.put((None, _Failure(f"an exception in worker_init_fn of DataLoader worker {worker_id}")))
        return
    while True:
        task = index_queue.get()
        if task is None:
            return
        number, indices = task
        try:
            if hasattr(dataset, "__getitems__"):
                batch = collate_fn(dataset.__getitems__(indices))
            elif isinstance(indices, list):
                batch = collate_fn([dataset[i] for i in indices])
            else:
                batch = collate_fn(dataset[indices])
        except Exception:
            batch = _Failure(f"an exception in DataLoader worker process {worker_id}")
        result_queue.put((number, batch))


class WorkerBatches:
    """One iteration over worker processes: started when made, stopped when exhausted, closed or collected."""

    # How often the loader checks that its workers are alive while it waits for a batch.
    _POLL_SECONDS = 1.0

    def __init__(self, loader, tasks, base_seed):
        context = loader.multiprocessing_context or multiprocessing.get_context()
        if isinstance(context, str):
            context = multiprocessing.get_context(context)
        self._timeout = loader.timeout
        self._tasks = iter(tasks)
        self._results = context.Queue()
        self._index_queues = []
        self._workers = []
        for worker_id in range(loader.num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            w = context.Process(target=_loop, daemon=True,
                                args=(loader.dataset, loader.collate_fn, loader.worker_init_fn, worker_id,
                                      loader.num_workers, (base_seed + worker_id) % 2**63, index_queue,
                                      self._results))
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._sent = 0
        self._next = 0
        self._waiting = {}
        self._cycle = itertools.cycle(range(loader.num_workers))
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._send()

    def _send(self):
        task = next(self._tasks, None)
        if task is None:
            return
        self._index_queues[next(self._cycle)].put((self._sent, task))
        self._sent += 1

    def __iter__(self):
        return self

    def __next__(self):
        if self._next == self._sent:
            self.close()
            raise StopIteration
        while self._next not in self._waiting:
            number, batch = self._receive()
            if isinstance(batch, _Failure):
                self.close()
                raise strata.Error(batch.message)
            self._waiting[number] = batch
        batch = self._waiting.pop(self._next)
        self._next += 1
        self._send()
        return batch

    def _receive(self):
        waited = 0.0
        while True:
            try:
                return self._results.get(timeout=self._POLL_SECONDS)
            except queue.Empty:
                waited += self._POLL_SECONDS
            dead = [w for w in self._workers if not w.is_alive()]
            if dead:
                self.close()
                raise strata.Error(f"DataLoader worker (pid {dead[0].pid}) exited unexpectedly with exit code "
                                   f"{dead[0].exitcode}")
            if self._timeout and waited >= self._timeout:
                self.close()
                raise strata.Error(f"DataLoader timed out after {self._timeout} seconds")

    def close(self):
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
                w.join()
        self._workers = []
        self._index_queues = []

    def __del__(self):
        if getattr(self, "_workers", None):
            self.close()
