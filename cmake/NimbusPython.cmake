# The Python front end (python/): built when Debian's Python 3 headers, NumPy, pybind11 and DLPack's
# header are present.
# Debian's interpreter is preferred over one earlier on PATH (a pyenv shim), whose headers and
# site-packages are not the ones scripts/install-deps fills.
option(NIMBUS_PYTHON "Build the Python module (import nimbus)" ON)
if(NOT NIMBUS_PYTHON)
  return()
endif()
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module NumPy)
find_package(pybind11 CONFIG QUIET)
find_path(NIMBUS_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
if(NOT Python3_Development.Module_FOUND OR NOT Python3_NumPy_FOUND OR NOT pybind11_FOUND OR NOT NIMBUS_DLPACK_INCLUDE_DIR)
  message(STATUS "NIMBUS_PYTHON: the Python module is not built: it needs python3-dev, python3-numpy, "
                 "pybind11-dev and libdlpack-dev (scripts/install-deps installs them)")
  set(NIMBUS_PYTHON OFF)
endif()
