// Where chunk c of a batch lies (both chunk preps, rwkv7_wkv_chunk_prep.wgsl and rwkv7_wkv_chunk_prep_lane.wgsl):
// chunks are numbered across the batch's jobs in order, job j's after those of jobs 0..j−1.

// The first token and token count of chunk c of the batch; a count of 0 past the last chunk.
fn chunk_span(c: u32) -> vec2<u32> {
  var first = 0u;
  for (var j = 0u; j < batch.J; j++) {
    let job = jobs[j];
    let count = (job.z + CHUNK - 1u) / CHUNK;
    if (c < first + count) {
      let k = c - first;
      return vec2<u32>(job.y + k * CHUNK, min(CHUNK, job.z - k * CHUNK));
    }
    first += count;
  }
  return vec2<u32>(0u, 0u);
}
