/* Built against an installed prefix (ctest capi.install): the header and the
 * library found there, an error path through the API. */
#include <mtpspec.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  mtpspec_model* m = NULL;
  mtpspec_model_params p = mtpspec_model_default_params();
  p.model_path = "/nonexistent/model.bin";
  mtpspec_status s = mtpspec_model_load(&p, &m);
  printf("mtpspec %s: %s: %s\n", mtpspec_version(), mtpspec_status_name(s), mtpspec_last_error());
  return s == MTPSPEC_ERR_IO && m == NULL && strstr(mtpspec_last_error(), "nonexistent") ? 0 : 1;
}
