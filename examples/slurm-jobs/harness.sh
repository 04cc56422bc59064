# Sourced by the example jobs: the job-directory layout and the log line shapes of the training
# harness the triage rules were written for (examples/README.md). Nothing here trains anything;
# the jobs only print what a real run prints and fail the way real runs fail.

# outputs/<id>-<name>.log is the job's stdout (#SBATCH -o outputs/%j-%x.log); the job directory
# outputs/<id>-<name>/ beside it holds a `log` symlink back to it.
job_dir="outputs/${SLURM_JOB_ID}-${SLURM_JOB_NAME}"
mkdir -p "$job_dir"
ln -sfn "../${SLURM_JOB_ID}-${SLURM_JOB_NAME}.log" "$job_dir/log"

now() { date '+%Y-%m-%d %H:%M:%S'; }

header() {  # header MODEL STEPS
  echo "========================================================================"
  echo " slurm job ${SLURM_JOB_ID}  ${SLURM_JOB_NAME}  on ${SLURM_JOB_NUM_NODES} node(s)  started $(now)"
  echo "========================================================================"
  echo "SLURM_JOB_ID=${SLURM_JOB_ID}"
  echo "SLURM_JOB_NAME=${SLURM_JOB_NAME}"
  echo "SLURM_JOB_NODELIST=${SLURM_JOB_NODELIST}"
  echo "NNODES=${SLURM_JOB_NUM_NODES}"
  echo "RAY=0"
  echo "MODEL=$1"
  echo "STAGE_TIMEOUTS=preflight:900,pull:1800,ecc:600,train:259200"
  echo "PASSTHROUGH_ARGS=steps=$2 per_device_batch_size=4 enable_checkpointing=true"
  echo "== Preflight START $(now)"
  echo "== Preflight OK (1s)"
  echo "== Training START $(now)"
}

# steps RANK FROM TO: training progress lines as rank RANK prints them through srun --label.
steps() {
  local rank="$1" i
  for ((i = $2; i <= $3; i++)); do
    echo "${rank}: [$(now)] completed step: ${i}, seconds: 0.100, TFLOP/s/device: 401.967, Tokens/s/device: 3431.735, total_weights: 1048576, loss: 9.$((500 - i))"
    sleep 0.1
  done
}

summary() {  # summary STATUS EXIT
  echo "========================================================================"
  echo " JOB SUMMARY"
  echo "========================================================================"
  echo " Job:      ${SLURM_JOB_ID} ${SLURM_JOB_NAME}"
  echo " Status:   $1 (exit $2)"
  echo " Finished: $(now)"
  echo "========================================================================"
}
