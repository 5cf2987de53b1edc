// A kernel that never ends: it waits for a flag in its (poisoned) output that nobody
// writes. klab's watchdog must stop it in every command, report it as hung, and leave
// nothing on the GPU.

extern "C" __global__ void spin(float* out, const float* in, int n) {
  volatile unsigned* flag = reinterpret_cast<volatile unsigned*>(out);
  while (flag[0] != 12345u) {
  }
}
