/* ep_err: the size of the one-line error messages every module fills (err[EP_ERRLEN]), alone so
 * that modules needing only it do not pull in the configuration (ep_config.h). */
#ifndef EP_ERR_H
#define EP_ERR_H

#define EP_ERRLEN 512

#endif
