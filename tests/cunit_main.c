/* One CUnit runner: registers every suite of its folder (see tests/CMakeLists.txt) and runs them
 * in verbose mode. Exit status: 0 when every test passed, 1 otherwise. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include EP_SUITES_INC

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 1;
    }
    ep_register_all();
    CU_basic_set_mode(CU_BRM_VERBOSE);
    if (argc > 1) { /* run one suite by name */
        CU_pSuite s = CU_get_suite(argv[1]);
        if (!s) {
            fprintf(stderr, "no suite named %s\n", argv[1]);
            CU_cleanup_registry();
            return 2;
        }
        CU_basic_run_suite(s);
    } else {
        CU_basic_run_tests();
    }
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
